"""The load generator's end-to-end tests drive a live `m2cpp serve`
(tests/live_server.py) with `m2cpp bench serve`."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
