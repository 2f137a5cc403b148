"""Renderers: one Diagnosis, many views (terminal, markdown, JSON)."""
