"""Package marker for the CPU flash_attn stand-in."""
