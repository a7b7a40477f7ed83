// attention_ranges.cu - a host program (no GPU) that checks attention.cuh's block ranges against the
// visibility rule itself, pair by pair, over random lengths, windows and tile sizes: every visible
// (query, key) pair lies in a key block the forward (and grad_q's kernel) walks for its query block
// and in a query block grad_k/grad_v's kernel walks for its key block, and a tile the kernels leave
// unmasked (all_visible) holds no invisible pair of real rows. Built and run by tests/test_attention.py.
#include <cstdio>
#include <random>

#include "attention.cuh"

int main() {
    std::mt19937 rng(0);
    long failures = 0, pairs = 0;
    const int tiles[] = {16, 32, 64, 128};
    for (int trial = 0; trial < 4000 && failures < 20; trial++) {
        const int len_q = int(rng() % 200), len_k = int(rng() % 200);
        lab_attention_launch p = {};
        p.window_left = rng() % 3 == 0 ? -1 : int(rng() % 150);
        p.window_right = rng() % 3 == 0 ? -1 : rng() % 2 ? 0 : int(rng() % 150);
        const lab::Sequence seq{0, 0, len_q, len_k};
        const lab::Visibility vis(p, seq);
        const int bm = tiles[rng() % 4], bn = tiles[rng() % 4];
        for (int q0 = 0; q0 < len_q; q0 += bm) {
            int block_first, block_last; // the key blocks the forward and grad_q walk
            switch (bn) {
            case 16: vis.key_blocks_for<16>(q0, q0 + bm, &block_first, &block_last); break;
            case 32: vis.key_blocks_for<32>(q0, q0 + bm, &block_first, &block_last); break;
            case 64: vis.key_blocks_for<64>(q0, q0 + bm, &block_first, &block_last); break;
            default: vis.key_blocks_for<128>(q0, q0 + bm, &block_first, &block_last); break;
            }
            for (int i = q0; i < q0 + bm && i < len_q; i++) {
                for (int j = 0; j < len_k; j++) {
                    if (!vis.visible(i, j)) continue;
                    pairs++;
                    if (j / bn < block_first || j / bn >= block_last) {
                        if (failures++ < 20) std::printf("keys_for misses (%d, %d): Sq %d Sk %d window (%d, %d) tiles %d x %d\n",
                                                        i, j, len_q, len_k, int(p.window_left), int(p.window_right), bm, bn);
                    }
                }
            }
            for (int k0 = 0; k0 < len_k + bn; k0 += bn) {
                if (!vis.all_visible(q0, q0 + bm, k0, k0 + bn)) continue;
                for (int i = q0; i < q0 + bm && i < len_q; i++)
                    for (int j = k0; j < k0 + bn; j++)
                        if (!vis.visible(i, j) && failures++ < 20)
                            std::printf("all_visible hides (%d, %d): Sq %d Sk %d window (%d, %d)\n", i, j, len_q,
                                        len_k, int(p.window_left), int(p.window_right));
            }
        }
        for (int k0 = 0; k0 < len_k; k0 += bn) {
            int first, last;
            vis.queries_for(k0, k0 + bn, &first, &last);
            const int block_first = first / bm, block_last = last > first ? (last + bm - 1) / bm : block_first;
            for (int j = k0; j < k0 + bn && j < len_k; j++)
                for (int i = 0; i < len_q; i++)
                    if (vis.visible(i, j) && (i / bm < block_first || i / bm >= block_last) && failures++ < 20)
                        std::printf("queries_for misses (%d, %d): Sq %d Sk %d window (%d, %d)\n", i, j, len_q, len_k,
                                    int(p.window_left), int(p.window_right));
        }
    }
    // a packed batch's bounds are clamped into the rows given, whatever the lengths say
    const int32_t lying[] = {5, 2, 900, -7};
    lab_attention_launch p = {};
    p.cu_seqlens_q = p.cu_seqlens_k = lying;
    p.cu_seqlens_q_stride = p.cu_seqlens_k_stride = 1;
    p.total_q = p.total_k = 100;
    for (int b = 0; b < 3; b++) {
        const lab::Sequence s = lab::sequence_of(p, b);
        if (s.q_start < 0 || s.len_q < 0 || s.q_start + s.len_q > 100) {
            failures++;
            std::printf("sequence %d: start %lld, length %d outside 100 rows\n", b, (long long)s.q_start, s.len_q);
        }
    }
    std::printf("%ld visible pairs checked, %ld failures\n", pairs, failures);
    return failures != 0;
}
