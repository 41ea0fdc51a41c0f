"""Programs that run on nodes or detached: standard library only, they import nothing from sparktui.

Each file here is a standalone program. ``sparse_rows`` is the staging agent, sent to every
node's ``python3`` over stdin and run there; ``local_shim`` is the detached supervisor of one
local rank. The rest of sparktui may import their constants and helpers (agents sit below
``core``), but an agent never imports from ``sparktui``.
"""
