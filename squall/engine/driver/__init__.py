"""The driver's side of a running topology, whatever runs its tasks: the wave coordinator and
its loop, what every driver keeps (stats, errors, captured emits), the lost-wave policy, wave
sizing, and the clocks that say when ticks and checkpoints are due."""
