"""The bottom of the HLO layers: the IR (``ir``), its attribute kinds (``attrs``), the opcode
table (``opcodes``), module-level data (``module_data``), async chains (``async_chain``) and
the text printer (``printer``). Imports only the shape layer; the op definitions, the parser
and the verifier sit above it. Importing this package imports nothing: its modules are
imported by name."""
