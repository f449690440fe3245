"""Turning regulation files into citable chunks: `load_document` reads a file, `chunk_document`
splits it along the document's own legal units (sections, articles, recitals, annexes, subsections).
"""
from core.errors import DocumentError
from core.ingest.chunker import chunk_document
from core.ingest.loaders import Heading, LoadedDocument, load_document

__all__ = ["DocumentError", "Heading", "LoadedDocument", "chunk_document", "load_document"]
