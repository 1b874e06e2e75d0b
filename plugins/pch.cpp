// The object library that owns the built-in plugins' precompiled header (pch.h) needs a source.
