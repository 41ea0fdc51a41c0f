"""A seeded chaos soak of a running group on the real test cluster (issue 31).

A group of the demo engine runs on the 4-node test cluster with ``sparktui watch`` following it
(its restart watchdog armed); faults drawn from a table (``faults``) hit it at random moments of
a seeded schedule (``soak``), and checkers compare sparktui's files and states with what Docker
says on each node (``truth``), after each fault and at the end. ``python -m tests.chaos`` runs a
soak by hand (minutes and a range of seeds); ``tests/realparts/test_chaos.py`` runs a short one
in CI with fixed seeds, and proves the checkers can fail (a planted defect, ``plant``).
"""
