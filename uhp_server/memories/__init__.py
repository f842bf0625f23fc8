"""Memories (UHP 2026-10-04, Memories chapter): a tree of memories, access granted per node
and inherited down to a restricted one, and versioned records that reference one another.

The chapter is served unless the operator sets UHP_MEMORIES=off (docs/memories.md says what
is built). Where each part lives:
- access.py: who a caller is to the access model, and what it may do on each node (the
  inheritance and the cutoff); knows nothing of storage.
- content.py: a record's content parts, references and fields, checked as a write states them.
- records.py: the chapter's objects as the facade answers them (Memory, MemoryRecord, ...).
- provider.py: what keeps a memory's records (the seam an adapter fills);
  embedded.py: the provider that keeps them in the server's own database; mem0/: the adapter
  to mem0 (docs/memory-providers.md); capabilities.py: a provider's capability document;
  registry.py: the `uhp_server.memory_providers` entry points UHP_MEMORY_PROVIDERS names.
- errors.py: the chapter's errors (§12).
Storage: storage/memories.py. The facade: engine/facade/memories.py. The routes:
doors/uhp/memories.py.
"""
