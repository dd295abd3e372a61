"""LoRA adapters on the base model: reading PEFT adapters (`peft_loader`), their low-rank deltas
on the base projections (`linear_delta`), and the runner's set of loaded adapters (`model_loras`)."""
