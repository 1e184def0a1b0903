"""traceq's metric definitions: readable SQL, one file per metric (installed as ``traceq.queries``)."""
