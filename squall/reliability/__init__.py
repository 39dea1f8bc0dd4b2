"""Storm's tuple-tree reliability: ids, anchoring, the XOR ledger, timeouts. No Spark here."""
