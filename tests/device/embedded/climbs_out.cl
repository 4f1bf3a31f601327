/* A root that includes a file outside its folder, which the embedding
   refuses (tests/CMakeLists.txt, embed_refuses_other_folders). */
#include "../part.cl"
