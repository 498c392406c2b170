"""Common English words for the synthetic SentencePiece vocabulary.

Hand-written for this project, roughly ordered from most to least frequent: when a
small vocabulary cannot hold every word, the builder keeps the words that come first.
The first line holds the words that tests and demos rely on, so that even the tiny
test model tokenizes them as whole words.
"""

from __future__ import annotations

_RAW = """
the quick brown fox jumps over lazy dog hello world a an and of to in is it you that he was for on are
with as his they be at one have this from or had by not but what some we can out other were all there
when up use your how said each she which do their time if will way about many then them write would
like so these her long make thing see him two has look more day could go come did number sound no most
people my than first water been call who oil its now find down only get made may part new old small big
good great little own right large next early young important few public bad same able last late hard
real best better low high free full sure clear whole open short true less least much very just also
well still even back here there where why again never always often sometimes today tomorrow yesterday
year week month hour minute second morning evening night noon life man woman child children men women
boy girl baby family friend mother father sister brother son daughter wife husband parent home house
room door window wall floor table chair bed kitchen garden street road city town country state world
place school work office company business job money price cost market bank store shop book page word
line name story letter paper note list question answer problem reason idea fact point case example
group system program service order point hand head face eye eyes ear nose mouth tooth teeth hair arm
leg foot feet body heart mind voice side end part area kind sort type form level power force law war
peace history art music song film game sport team player ball car bus train plane ship boat bike
food bread milk tea coffee wine beer meat fish egg rice apple orange banana fruit sugar salt cake
cat cow horse bird pig sheep mouse lion tiger bear wolf rabbit duck chicken snake frog bee ant
red blue green yellow black white gray grey pink purple gold silver dark light bright color colour
sun moon star sky cloud rain snow wind storm fire air earth sea ocean river lake mountain hill
forest tree flower grass leaf stone rock sand island beach field farm land ground
zero three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred
thousand million billion half third quarter dozen once twice
say says saying says told tell tells telling ask asked asking asks know knew known knows think thought
thinks thinking take took taken takes taking give gave given gives giving find found finds finding
go goes going went gone come came comes coming get got gets getting make makes making see saw seen
sees seeing want wanted wants wanting use used uses using work worked works working call called calls
try tried tries trying need needed needs feel felt feels feeling become became becomes leave left
leaves leaving put puts putting mean meant means keep kept keeps let lets begin began begun begins
seem seemed seems help helped helps show showed shown shows hear heard hears play played plays run
ran runs running move moved moves live lived lives living believe believed believes bring brought
brings happen happened happens write wrote written writes writing sit sat sits stand stood stands
lose lost loses pay paid pays meet met meets include included includes continue continued set sets
learn learned learns change changed changes lead led leads understand understood watch watched
follow followed follows stop stopped stops create created creates speak spoke spoken speaks read
reads reading allow allowed allows add added adds spend spent spends grow grew grown grows open
opened opens walk walked walks win won wins offer offered offers remember remembered love loved loves
consider considered appear appeared appears buy bought buys wait waited waits serve served serves die
died dies send sent sends expect expected build built builds stay stayed stays fall fell fallen falls
cut cuts reach reached kill killed remain remained suggest suggested raise raised pass passed sell
sold sells require required report reported decide decided pull pulled push pushed carry carried
break broke broken drive drove driven eat ate eaten drink drank sleep slept sing sang sung swim swam
fly flew flown throw threw thrown catch caught teach taught fight fought choose chose chosen forget
forgot forgotten hold held wear wore worn draw drew drawn hide hid ride rode rise rose shake shook
steal stole wake woke hang hung shoot shot feed fed lend lent bend bent burn burned dream dreamed
jump jumped kick kicked laugh laughed smile smiled cry cried shout shouted whisper whispered listen
listened look looked looks looking turn turned turns start started starts finish finished end ended
close closed closes check checked fix fixed test tested return returned load loaded save saved
answer answered explain explained describe described compare compared count counted measure measured
agree agreed argue argued plan planned hope hoped wish wished fill filled hit cover covered
travel traveled visit visited enjoy enjoyed thank thanked welcome worry worried hurry hurried
good better best bad worse worst big bigger biggest small smaller smallest old older oldest new newer
newest long longer longest short shorter fast faster fastest slow slower slowest easy easier
hard harder simple simpler happy sad angry tired hungry cold hot warm cool wet dry clean dirty
rich poor strong weak heavy thin thick wide narrow deep shallow soft loud quiet busy empty
beautiful pretty ugly nice kind fine strange special certain possible different similar common
general main major minor local national international social political economic human natural
physical personal private final basic serious simple recent current past future present modern
ancient dead alive ready famous popular useful useless careful careless safe dangerous fresh
sweet sour bitter tall huge tiny round flat square sharp smooth rough quick lazy brave clever
wise foolish honest polite rude calm gentle wild fair true false wrong correct exact perfect
whole entire single double main central north south east west northern southern eastern western
left right top bottom front middle inside outside above below under between behind beside near
far around through across along against among without within during before after since until
while because though although unless whether either neither both each every any many much more
most several enough such own same another other else quite rather really almost already yet
soon later now then once ever perhaps maybe probably actually usually finally simply nearly
only also too very so not just even still instead together away forward backward upward
i me my mine myself you your yours yourself he him his himself she her hers herself it its
itself we us our ours ourselves they them their theirs themselves who whom whose what which
this that these those here there somebody someone something somewhere anybody anyone anything
anywhere nobody nothing nowhere everybody everyone everything everywhere
am is are was were be been being have has had do does did done can could will would shall should
may might must ought yes no ok okay please thanks thank sorry hi hey bye goodbye
government information problem student teacher doctor nurse police officer soldier worker
driver farmer writer artist singer actor leader member president king queen prince princess
god church religion science nature computer phone internet email website software hardware
data file code model server client request response error message text token prompt user
machine network memory disk screen keyboard video image picture photo camera radio television
news newspaper magazine article report research study test exam class lesson course college
university library museum hospital hotel restaurant airport station park bridge tower castle
village region province nation empire army navy battle weapon gun sword shield horse wheel
engine fuel energy gas electricity heat sound noise music voice language english french german
spanish chinese japanese russian italian english culture society community population economy
industry trade tax budget income profit loss value rate level amount total number size weight
height length width depth speed distance direction position shape pattern structure process
method result effect cause purpose goal plan project policy rule law right duty freedom
health disease illness pain death birth age youth childhood war fight attack defense victory
chance choice decision experience knowledge skill ability talent interest attention effort
success failure mistake accident danger risk safety security trust truth lie secret mystery
surprise fear anger joy happiness sadness love hate hope dream wish desire pleasure fun humor
beauty art design style fashion clothes shirt dress shoe shoes hat coat jacket pocket bag box
cup glass plate bowl spoon fork knife bottle can jar pot pan oven fridge sink bath shower towel
soap brush comb mirror clock watch ring key lock gate fence roof stairs corner edge surface
bottom top center middle point line circle square triangle ball block piece bit lot pile set
pair couple group crowd team club party meeting event festival holiday vacation trip journey
tour visit guest host owner boss manager director chief captain master servant slave
neighbor stranger enemy partner colleague customer guest citizen people person individual
animal plant seed root branch fruit vegetable potato tomato carrot onion garlic bean corn wheat
butter cheese cream oil honey soup salad sandwich pizza pasta noodle cookie chocolate candy
breakfast lunch dinner supper meal snack dish recipe taste smell touch sight hearing sense
monday tuesday wednesday thursday friday saturday sunday january february march april june
july august september october november december spring summer autumn fall winter season
weather temperature degree climate storm thunder lightning fog ice frost heat wave flood
island coast shore bay harbor port valley desert jungle cave field meadow pond stream spring
metal iron steel copper wood glass plastic paper cloth cotton wool leather rubber stone brick
diamond pearl gold silver coin dollar euro pound cent penny price bill card cash account
fast quickly slowly carefully easily hardly badly loudly quietly happily sadly suddenly
finally early late soon often never always seldom rarely again twice alone together apart
abroad ahead aside indoors outdoors upstairs downstairs home online offline
computer program function variable value string integer float list array object class method
library module package version release update install build deploy config setting option
input output format parse query search filter sort index key value table column row record
batch stream queue cache buffer thread process task job worker pool lock event signal
endpoint route handler header body status latency throughput metric log trace debug warning
start stop pause resume restart shutdown health ready alive timeout retry limit quota
count sum average mean median minimum maximum range sample random seed score rank
chat assistant system role content reply answer question instruction example context window
generate generation complete completion predict prediction inference train training learn
weight layer vector matrix tensor graph node edge path tree root leaf branch map set
true false null none empty default custom simple complex fast slow small large
add remove insert delete create destroy open close read write send receive connect
accept reject allow deny enable disable show hide print copy paste move rename
able about above accept across act action active activity actor actual address admit adult
affect afford afraid age agency agent ago agreement ahead aim air alarm album alcohol alert
amazing ambition amount analysis analyst angle announce annual anxiety anxious apart apartment
apparent appeal apply approach approve argument arise arrange arrival arrive article aspect
assume attach attempt attend attitude attract audience author authority available avenue
avoid award aware awful balance band barely base basis basket battery beat beauty bedroom
behave behavior belong belt benefit bet beyond birthday bite blade blame blank blanket blind
blood blow board bold bomb bone bonus border boring borrow bother bottle boundary brain brand
brave breath breathe brick brief bright brilliant broad brush budget bunch burden burst
button cable calculate camp campaign cancel cancer candidate capable capacity capital career
careful cargo carpet cart cast category ceiling celebrate cell century ceremony chain chair
challenge champion channel chapter character charge charity chart chase cheap cheat chemical
chest chief chip circle citizen civil claim classic climb clinic clock closet cloud coach coal
code collect column combine comfort command comment commit committee communicate compete
complain complete complex concept concern concert conclude condition conduct confidence
confirm conflict confuse connect conscious consequence consist constant construct consume
contact contain contest contract contrast contribute control convert convince cook copy core
corn correct cottage cotton couch council counter courage court cousin crack craft crash
crazy credit crew crime crisis criticism crop cross cruel culture curious current curtain curve
cushion cycle damage dance dare data date deal dear debate debt decade deck declare decline
decrease defeat defend define delay deliver demand deny depend deposit deserve desk despite
destroy detail detect develop device devote diet differ difficult dig dinner direct dirt
disagree disappear discover discuss dismiss display distance distinct divide document dollar
domain donate double doubt dozen draft drag drama drawer dress drift drill drop drug drum due
dust duty eager earn ease economy edge edit educate effect efficient elbow elect element
elephant elevator eliminate embrace emerge emotion emphasis empire employ enemy engage
engineer enhance enormous ensure enter entertain enthusiasm entry envelope environment equal
equip era escape essay essential establish estate estimate evaluate evidence evil evolve exact
examine excellent except exchange excite exclude excuse execute exercise exhibit exist exit
expand expense expensive expert explore export expose express extend extra extreme fabric
factor factory faculty fade faint faith false familiar fancy fantasy fashion fault favor
favorite feature federal fee female fiction figure final finance firm fiscal fit flag flame
flash flavor flee flesh flight float flow fluid focus fold folk fond forecast foreign forever
formal former fortune forum foundation fraction frame frequent fridge frozen fuel fund funny
furniture gain gallery gap garage gather gear gender generous genius gentle genuine gesture
ghost giant gift glad glance global glove glow goal golden grab grace grade grain grand grant
grape grasp grave gravity greet grief grocery guarantee guard guess guide guilty guitar habit
hall handle harbor harm harvest hat hatred headline heal hero hesitate hidden highlight highway
hire hobby hole holy honey honor horror host household housing hunt hurt ideal identify ignore
illegal illustrate image imagine impact imply import impose impress improve incident income
increase indeed independent indicate industry infant inform initial injury inner innocent
inquiry insect insight insist inspect inspire instance instant institute insurance intend
intense internal interpret interval interview introduce invent invest investigate invite
involve island issue item jacket jail joint joke journal judge juice junior jury justice
keen kid kidney knee knock label labor lack ladder lady lamp landscape lane laptop laser
launch laundry lawyer layer lead leaf lean lecture legal legend lemon lens lesson liberal
license lid lift limb limit link lip liquid literature lively loan lobby location logic lonely
loose lord lottery lovely loyal luck lucky lung luxury magic mail maintain male mall manage
manner manual margin marine mark marriage mass match mate material matter mayor meal meanwhile
measure mechanism medal media medical medicine medium melt membership memory mental mention
menu mercy merely mess metal meter middle midnight mild military mill mineral minister minor
minute miracle mirror miss mission mix mobile mode moderate modest moment monitor monkey mood
moral motion motor mount mouse movie mud multiple murder muscle mutual myth naked narrative
native navy neat necessary neck negative negotiate nerve nervous nest net neutral nice noble
normal notable notice notion novel nuclear numerous nut obey object obligation obtain obvious
occasion occupy occur odd offense official ongoing onion opera operate opinion opponent
oppose opposite option oral orbit ordinary organ organize origin outcome outfit oven overall
owe oxygen pace pack package pad pain paint palace pale palm panel panic parade parallel
parking partly passage passenger passion patch patient patrol pause peak peer penalty pencil
pension pepper percent perform period permit persuade pet phase phrase physician piano pick
pie pile pilot pin pipe pitch pity planet plastic plate platform pleasant plenty plot pocket
poem poet poetry poison pole poll pool pop port portion portrait pose possess post pot
potential pour poverty powder practice praise pray precise predict prefer pregnant premium
prepare presence preserve press pressure pretend prevent pride priest primary prime principal
principle print prior priority prison privacy prize procedure proceed produce product profile
progress promise promote prompt proof proper property proportion proposal protect protein
protest proud prove provide province pub publish pump punch punish pupil purchase pure pursue
puzzle qualify quality quantity quarter queen quit quote race rail raise random range rapid
rare rarely rat raw ray react reader realize rear reasonable recall receipt recipe recognize
recommend recover reduce refer reflect reform refuse regard regional register regret regular
reject relate relax release relevant relief religion rely remind remote rent repair repeat
replace reply represent republic reputation rescue reserve resident resign resist resolve
resort resource respect respond responsible rest restore restrict retain retire reveal revenue
reverse review reward rhythm rib ribbon rid ridge rifle rival robot rocket role roll romantic
rope rough routine royal rub rude ruin rural rush sack sacred saddle sail salary sale salmon
sample satisfy sauce scale scan scare scatter scene schedule scheme scholar scope score scream
screw script sculpture seal secretary section sector seek segment seize select senior sensible
sentence separate sequence series session settle severe sew shade shadow shallow shame shape
share shelf shell shelter shift shine shock shore shoulder shrug sibling sick signal silence
silk silly similar sin sincere site situation skin skirt slice slide slight slip slope smart
smoke snap soap soccer sock sofa soil solar soldier solid solution solve somewhat soul source
space spare spark speaker species specific speech spell spice spider spin spirit spite split
spoil sponsor spot spray spread square squeeze stable stack staff stage stake stamp standard
stare state statement statue steady steam steep stem step stick stiff stock stomach storage
straight strategy straw strength stress stretch strict strike string strip stroke structure
struggle stuff stupid subject submit substance subtle suburb succeed sudden suffer suit summit
supply support suppose supreme surgery surround survey survive suspect sustain swallow swear
sweat sweep swing switch symbol sympathy tackle tail talent tank tape target task teenager
telescope temple tend tender tennis tension tent term terrible territory terror texture theme
theory therapy thick thief thin thread threat throat thumb ticket tide tight tile tip tissue
title toast tobacco toe toilet tomorrow tone tongue tool topic torch tough tourist toward towel
toy trace track tradition traffic tragedy trail transfer transform transition translate
transport trap trash tray treasure treat treaty trend trial tribe trick trip troop trophy
trouble truck trust tube tune tunnel twin twist typical ugly ultimate umbrella uncle union
unique unit universe unusual upper upset urban urge urgent usual vacuum valid valley van
variety various vast vehicle venture verse vessel veteran victim view village violence
virtual virtue visible vision visual vital vivid vote voyage wage wagon waist wander war warn
wash waste wealth weapon weave wedding weekend weird whale wheat whip whisper wild willing
wing wire wisdom witness wonder wonderful wooden worth wound wrap wrist yard yell yield zone
abandon absence absolute absorb abstract abuse academic accent access accompany accomplish
accuracy accurate accuse achieve acid acknowledge acquire adapt adequate adjust administer admire
adopt advance advantage adventure advertise advice advise advocate aircraft airline aisle alien
align alike allocate ally alter alternative amateur amaze ambulance amend ample amuse analyze
ancestor anchor ankle anniversary announce annoy anticipate apology apparatus appetite applaud
appliance appoint appreciate apprentice approximate apron arch architect archive arena arrow
artifact ash assault assemble assert assess asset assign assist associate assure astonish athlete
atmosphere atom attic auction audio authentic autumn avenue average awake awkward axis
bachelor backup bacon badge bake bald ballet bamboo banner bare bargain bark barn barrel barrier
basin bat beam beard beast bee beg behalf bell bench berry bias bible bicycle bid bind biology
biscuit bishop blast bleed blend bless blossom blouse blunt blur blush boast bolt bond boom boost
boot bore boss bounce bound bow brake brass bread breed breeze bride brief broadcast broom brow
bubble bucket buddy bulb bulk bull bullet bundle burial bury bush butterfly cabin cabinet cafe
cage calendar calf calm canal candle cannon canvas canyon cap cape captain capture carbon cardboard
carriage cartoon carve casino casual catalog cattle cave cease cedar celebrity cement census cereal
certificate chaos chapel charm charter cheek cheer chess chew chill chimney chin choir chop chorus
chronic cigarette cinema circuit circus cite clap clarify clash clay clerk cliff climate clinical
clip cloth clue cluster coalition coast cocktail coconut coffin coil collapse collar colleague
colony colorful comedy comic commander commerce commission companion compass compile complaint
component compose compound comprehensive comprise compute conceal concentrate conception
concrete condemn conference confess configure confront congress conquer consent conserve
consult container contemporary content context continent contractor convenient convention
conversation convey cooperate coordinate cope copper cord corporate corridor cosmetic costume
cottage cough counsel cozy crab cradle cram crane crawl cream crest crisp critic crowd crown
crucial crude cruise crumb crush crystal cube cuisine cultivate cupboard cure curl custody
customs cute dairy dam dancer dawn deadline deaf dealer debris deceive decent decorate dedicate
deer defect deficit delegate delete deliberate delicate delicious delight demonstrate dense
dentist departure depict depression deprive deputy derive descend desert designer desperate
dessert destination detective determine devil diagnose diagram dialogue diamond dictate
dictionary differ digital dignity dilemma dimension diminish dine diploma diplomat disabled
disaster discipline disclose discount discourse disguise disk dispute distant distinguish
distort distribute district disturb dive diverse divine divorce dizzy doctrine dolphin dome
donkey dose dough dove drain dread drown dual duck dump durable dwell dynamic eagle echo
ecology edition editor eel effective elaborate elastic elder elegant elevate elite embassy
emergency emission emperor empty enact encounter endorse endure energetic enforce engine
enroll enterprise entity epidemic episode equation equator equivalent erase erect erosion
error erupt essence eternal ethic ethnic evacuate evening evident exaggerate excess exclusive
exhaust exotic expedition experiment explicit explode exploit explosion expression exquisite
extension exterior external extinct extract fabulous facility faction fairy fake fame famine
fantastic fare fascinate fatal fate fatigue feast feather fellow fence ferry fertile festival
fever fiber fierce filter fin fingerprint fist flask fleet flexible flock flour fluent flush
foam fog foil folder forbid forehead forge format formula fort fossil foster fountain fox
fragile fragment frank fraud freeze freight frequency friction fringe frog frontier fruitful
frustrate fury fuse fuss galaxy gamble garbage garlic gasoline gauge gaze generate generation
geography germ giggle ginger giraffe glacier glimpse glitter globe glory goat gorgeous gospel
gossip govern gown graceful graduate grammar graph grateful gravel graze greed grid grill grin
grind grip groan groom gross grove growl guardian guest guideline gulf gum gym hammer hamster
handsome harmony harsh hatch haul haunt hawk hay hazard headquarters heap heaven hedge heel
helicopter helmet hemisphere herb herd heritage hint hip hire hollow homeland honest hook horizon
horn hostage hostile humble humid hut hybrid hymn hypothesis icon identical idle idol ignite
illusion immense immigrant immune implement imitate impulse incentive inch incline indoor
inevitable infection inflation influence inherit inject ink inn input insert inspector install
instinct instruct instrument integral intellect interact interior invade inventory invisible
iron ironic irony isolate ivory jam jar jaw jazz jealous jelly jewel jockey jog journey joy
jungle junk kettle keyboard kingdom kit kite kitten knit knot ladder lamb landlord lap latitude
lava lawn league leak leap lease leather ledge lemon leopard lettuce lever liable liberty lily
limestone linen liver lizard lobster lodge lofty log lonely lottery lounge lumber lunar lure
lyric machinery magnet maid majesty mammal mansion maple marble margin marsh mask massive mast
mattress maze meadow mechanic melody melon mentor merchant mercury merge merit mesh metaphor
microphone migrate militia mimic mint miserable missile mist mobile moist molecule monarch
monastery monk monster monument mosque mosquito moth mould mourn mouth mule mummy mural museum
mushroom musician mustard myth nail napkin narrow nasty navigate necklace needle neglect nephew
niece nightmare noodle norm nostril notebook nourish novelist nursery nutrition oak oath oatmeal
obscure observe obstacle ocean octopus offspring olive omit opera orchard orchestra ordeal organic
orient ornament orphan ostrich outbreak outlet outline outrage oval overlap overlook owl oyster
paddle pagan palette pamphlet pancake panda pants parachute paragraph parcel pardon parrot
parsley particle partition pasture patent patience pavement paw peach peanut pear peasant pebble
pedal peel pelican penguin peninsula pepper perfume peril permanent persist pest petal petrol
pharmacy pheasant philosophy photograph physics pickle pier pigeon pillar pillow pine pinch
pioneer pirate pistol pit plague plain plank plaster plea pledge plug plum plumber plunge
pneumonia poet polar polish pony porch pork portable possum potter pouch poultry prairie prawn
preach precious predator preface prejudice prescribe presentation preside prestige prey pride
probe proclaim prodigy profound prohibit prolong prominent propel prophet prose prosper prototype
proverb prune psalm publisher pudding pulse pumpkin puppet puppy purse pyramid quaint quake
quarrel quest queue quiet quilt quiz rabbit raccoon radar radiant radish raft rage raid railway
rainbow raisin rake rally ranch rash raven razor realm rebel receiver recess recycle reef refine
refrigerator refugee reign rein relic remedy render renew rental reptile rescue resemble
reservoir residue resin retreat rhyme riddle rim rinse riot ripe ripple ritual roar roast robe
robin rod rodent rookie rooster rosary rotate rotten rubbish rug ruler rumor rust sabotage saga
sage saint salad saliva salon salute sanction sandal sardine satellite satire saucer sausage
savage scarf scent scissors scoop scorpion scout scrap scratch screen scroll scrub sculptor
seafood seagull seam sermon serpent sewer shark shawl shed shepherd sheriff shield shin shiver
shovel shrimp shrine shrub siege sieve sigh silicon silhouette sketch skeleton skull slab slang
slate sled sleeve slender slogan slot slug smash snail sneeze sniff snore soda sole sonnet soup
spade sparrow spear spectacle spectrum sphere spine spiral splash sponge spoon sprout squad
squash squirrel stadium stain stairway stall stallion stanza starch startle stew stool stork
strand strap stripe stroll stub studio stump sturdy submarine suitcase sulfur summon sunset
surge surplus swamp swan swarm sweater syllable syrup tablet tactic tadpole talon tambourine
tangle tapestry tar tariff tavern tease teapot tempest tenant terrace theater thermometer thigh
thistle thorn thrill throne thunder tidy tiger timber tin toad tofu tomb torment tornado tortoise
towel tractor tram tranquil trapeze treadmill trench triangle tribute trifle trio triumph trolley
trombone trout trumpet trunk tsunami tuba tulip turkey turnip turtle tutor twig typhoon ulcer
umpire unicorn uniform upholstery utensil vaccine vanilla vapor vase vault velvet vendor
verdict vest veterinarian villain vine vinegar violin viper visa volcano volume vulture wallet
walnut walrus wardrobe warehouse wasp weasel webcam wharf whiskey whistle wick widow wig
windmill wizard wolf woodpecker workshop wreath wreck wren yacht yarn yeast yoga yolk zebra zipper
"""

# Order is kept (dict preserves insertion order) while repeats from the loosely
# grouped lines above are dropped.
WORDS: tuple[str, ...] = tuple(dict.fromkeys(_RAW.split()))

# Capitalised forms of the most frequent words, for sentence starts and chat text.
CAPITALIZED_COUNT = 300
