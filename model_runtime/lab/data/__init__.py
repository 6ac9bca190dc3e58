"""The 4D data engine (bpy-free): scene families, the reference simulator (implicit FEM for solids, MuJoCo for
cloth; Newton VBD only for the v1 dataset's settings), the sequence format and tools."""
