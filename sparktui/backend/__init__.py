"""The asyncio backend: node transports, container runtimes, the Orchestrator and its events."""
