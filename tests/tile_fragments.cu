// tile_fragments.cu - a host program (no GPU) that replays ldmatrix.x4 on tile_mma.cuh's swizzled
// tiles and checks every register of every lane against the mma.sync.m16n8k16 layout PTX defines:
// A (row g, cols 2t, 2t+1), (row g+8, ...), (row g, cols 2t+8, 2t+9), (row g+8, ...); B (k 2t, 2t+1;
// col g), (k 2t+8, 2t+9; col g) - for the A fragments, the B pairs read as the tile's transpose and
// the B pairs read transposed, at every 16-aligned block of tiles as wide as attention's. It also
// checks that the swizzle is one-to-one and that the eight rows one ldmatrix phase reads lie in eight
// different bank groups. Built and run by tests/test_attention.py.
#include <cstdio>
#include <vector>

#include "tile_mma.cuh"

namespace {

long failures = 0;

void fail(const char *what, int lane, int reg, int half, int want_row, int want_col, int got) {
    if (failures++ < 20) {
        std::printf("%s: lane %d register %d half %d holds %d, want element (%d, %d)\n", what, lane, reg, half, got,
                    want_row, want_col);
    }
}

// A tile of kRows x kColumns whose element (r, c) holds r * 1000 + c, stored through the swizzle.
template <int kRows, int kColumns> struct HostTile {
    using Tile = lab::SwizzledTile<kRows, kColumns>;
    std::vector<int> memory = std::vector<int>(Tile::kElements, -1);
    HostTile() {
        std::vector<int> seen(Tile::kElements, 0);
        for (int r = 0; r < kRows; r++) {
            for (int chunk = 0; chunk < kColumns / 8; chunk++) {
                const int at = Tile::chunk_offset(r, chunk);
                if (at < 0 || at + 8 > Tile::kElements || at % 8 != 0 || seen[at]++) {
                    if (failures++ < 20) std::printf("swizzle: (%d, %d) at %d collides or leaves the tile\n", r, chunk, at);
                }
                for (int e = 0; e < 8; e++) memory[at + e] = r * 1000 + chunk * 8 + e;
            }
        }
    }
    // ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8; register m of lane l gets
    // that matrix's row l / 4, elements 2 (l % 4) and +1 - or, transposed, its column l / 4 at rows
    // 2 (l % 4) and +1. Fills values[lane][m][half].
    template <typename Spot> void ldmatrix(Spot spot, int a, int b, bool trans, int values[32][4][2]) const {
        int row_start[4][8];
        for (int lane = 0; lane < 32; lane++) {
            const lab::TileSpot s = spot(a, b, lane);
            row_start[lane / 8][lane % 8] = Tile::chunk_offset(s.row, s.chunk);
        }
        for (int m = 0; m < 4; m++) { // one phase per matrix: its eight rows in eight bank groups
            int groups = 0;
            for (int r = 0; r < 8; r++) groups |= 1 << ((row_start[m][r] * 2 / 16) % 8);
            if (groups != 0xff && failures++ < 20) std::printf("matrix %d of a phase shares a bank group\n", m);
        }
        for (int lane = 0; lane < 32; lane++) {
            for (int m = 0; m < 4; m++) {
                for (int half = 0; half < 2; half++) {
                    const int row = trans ? 2 * (lane % 4) + half : lane / 4;
                    const int col = trans ? lane / 4 : 2 * (lane % 4) + half;
                    values[lane][m][half] = memory[row_start[m][row] + col];
                }
            }
        }
    }
};

template <int kRows, int kColumns> void check_tile() {
    const HostTile<kRows, kColumns> tile;
    int v[32][4][2];
    for (int r0 = 0; r0 + 16 <= kRows; r0 += 16) {
        for (int c0 = 0; c0 + 16 <= kColumns; c0 += 16) {
            tile.ldmatrix([](int a, int b, int l) { return lab::a_spot(a, b, l); }, r0, c0, false, v); // A at (r0, c0)
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane / 4, t = lane % 4;
                for (int reg = 0; reg < 4; reg++) {
                    for (int half = 0; half < 2; half++) {
                        const int row = r0 + g + (reg & 1) * 8, col = c0 + 2 * t + half + (reg >> 1) * 8;
                        if (v[lane][reg][half] != row * 1000 + col) fail("A", lane, reg, half, row, col, v[lane][reg][half]);
                    }
                }
            }
            tile.ldmatrix([](int a, int b, int l) { return lab::b_pair_spot(a, b, l); }, r0, c0, false, v); // B[k][n] = tile[n][k]: n from r0, k from c0
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane / 4, t = lane % 4;
                for (int reg = 0; reg < 4; reg++) { // first tile's b0, b1, then the second's
                    for (int half = 0; half < 2; half++) {
                        const int n = r0 + g + (reg >> 1) * 8, k = c0 + 2 * t + half + (reg & 1) * 8;
                        if (v[lane][reg][half] != n * 1000 + k) fail("B pair", lane, reg, half, n, k, v[lane][reg][half]);
                    }
                }
            }
            tile.ldmatrix([](int a, int b, int l) { return lab::b_pair_trans_spot(a, b, l); }, r0, c0, true, v); // B[k][n] = tile[k][n]: k from r0, n from c0
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane / 4, t = lane % 4;
                for (int reg = 0; reg < 4; reg++) {
                    for (int half = 0; half < 2; half++) {
                        const int k = r0 + 2 * t + half + (reg & 1) * 8, n = c0 + g + (reg >> 1) * 8;
                        if (v[lane][reg][half] != k * 1000 + n) {
                            fail("B pair transposed", lane, reg, half, k, n, v[lane][reg][half]);
                        }
                    }
                }
            }
        }
    }
}

} // namespace

int main() {
    check_tile<128, 64>();
    check_tile<64, 96>();
    check_tile<64, 128>();
    check_tile<32, 256>();
    std::printf("%ld failures\n", failures);
    return failures != 0;
}
