"""Ray's test clusters on this machine talk over the loopback address only: without this, Ray
names every node by the machine's outward address. Read when Ray is imported, so it is set here,
before any test module imports it."""
import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
