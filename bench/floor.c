/* The start-up floor for bench/startup.sh: a static program that does nothing but exec its
 * arguments, as any wrapper must. nccl-wrap's cost is measured over this. */
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    execv(argv[1], argv + 1);
    return 127;
}
