"""The asyncio backend: node shells, the runtime registry, the Orchestrator and its events."""
