"""The 4D data engine (bpy-free): scene families, the Newton reference simulator, the sequence format and tools."""
