"""`python -m pier.gateway`: what `pier up` runs."""

from pier.gateway.run import main

raise SystemExit(main())
