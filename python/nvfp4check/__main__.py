"""python -m nvfp4check: the worker's command line (see nvfp4check.worker)."""
import sys

from .worker import main

sys.exit(main())
