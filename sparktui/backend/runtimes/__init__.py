"""Runtimes, one module per kind of cluster, behind a registry (``registry.RUNTIMES``, as
``core.engines.ENGINES`` is for engines): ``ssh`` (Docker on each node, over SSH) and ``local``
(processes on this machine). What a runtime can do is declared as capabilities (``base``)."""
