"""Build-side builders for chapter tables, figures and widget payloads (one module per page)."""
