"""Developer tools on top of xlapy: compare and bisect backends, graphs, layout pictures."""
