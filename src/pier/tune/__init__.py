"""`pier tune`: the setup of copies, threads and engine settings that serves the most within an SLO on a host.

space (what may be tried), objective (the SLO and a trial's score, pure), halving (which candidates go on, pure),
trials (the state file of finished trials: resumable), trial (one trial: deploy on a gateway, `pier bench`,
delete), tuner (the search within a time budget), tune_report (table, plot, the winner's deploy file).
"""
