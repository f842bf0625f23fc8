"""A turn while it runs: the run and its life's phases (run), the registry of live runs
(registry), the executor that drives the base's CLI in the sandbox (executor) and stops it
(stopping), its slot (admission), its questions, its event log and the response built from
the CLI's events (builder, eventlog), its files in and out, and recovery after a restart."""
