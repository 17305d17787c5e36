"""The project's native code support, below every other package: where its compiled things
are cached (`cache_folder`) and how its C is built into shared libraries (`c_library`).
Imports nothing of the project."""
