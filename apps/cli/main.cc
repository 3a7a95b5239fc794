#include <cstdio>
int main() { std::puts("mambacpp"); return 0; }
