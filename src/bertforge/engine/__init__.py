"""What every loop runs on, knowing no model: devices, precision and processes (runtime), the optimizer and its
schedule (optim), the hardware's peak (hardware), checkpoints written whole and checked (checkpoint), and the
metrics log (metrics).
"""
