"""The sparktui demo engine: a standard-library-only stand-in for an SGLang rank (see ``engine.py``)."""
