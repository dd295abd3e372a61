"""One module per model family, each declaring its `FAMILY` (`sglr.model.family.Family`);
`sglr.model.registry` finds them. A family that extends another imports what it shares from
that one's module (Gemma 3 from Gemma 2, the Qwen families from Qwen2)."""
