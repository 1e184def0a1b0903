"""From reader output to the canonical tables: ids in time order, nesting, launch links, steps."""
