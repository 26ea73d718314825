"""Fresh items: written and reviewed by practitioners, kept hidden, so a score on them cannot be memorised."""
