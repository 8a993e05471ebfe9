"""One module per widget; host-derived text in any of them goes through ``safe_text``."""
