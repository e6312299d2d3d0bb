"""The node/port database: Ironic's schema, so either service can share Ironic's database."""
