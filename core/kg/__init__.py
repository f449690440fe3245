"""Knowledge graph (the "Hy" of HyPA-RAG): triplets extracted from the regulations, stored per
collection, walked at question time. See docs/KG.md."""
