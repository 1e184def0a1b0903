"""From reader output to the canonical tables: time order, ids, nesting, launch links, steps."""
