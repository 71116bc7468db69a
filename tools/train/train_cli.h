// ps-train's command line (the logic behind tools/ps_train_main.cc):
//
//   ps-train gen --out DIR [--kind additive|pairs|longtail --seed N
//                --train_rows N --test_rows N --train_files N --min_vocab N
//                --max_vocab N --zipf S --missing_rate P]
//                [pairs: --interaction_pairs N --factor_dim N
//                 --interaction_std F]
//                [longtail: --singleton_rate P --weight_drift F
//                 --bias_drift F]
//       Writes a synthetic Criteo-format data set of that kind
//       (train/synthetic.h) and its meta.json with the Bayes-optimal AUC.
//       A kind's flags given with another kind are a usage error.
//
//   ps-train --data DIR --checkpoint_dir CDIR [--store URL] [--mode sync|async]
//            [--epochs N --batch_size N --max_steps N --log_every N
//             --checkpoint_every N --checkpoint_every_s S
//             --keep_checkpoints N --eval_every N --valid_fraction F
//             --patience N]
//            [--rank R --world W --shard_by file|line]
//            [--cache_rows N --cache_policy lru|lfu|lookahead
//             --cache_mode write_back|push_through --cache_backend cpu|cuda]
//            [--model deepfwfm|wide_deep|deepfm|dcn|lr --cross_layers N]
//            [--deep_optimizer lazy_adam|adagrad --deep_lr F --deep_init F
//             --wide_lr F
//             --wide_l1 F --wide_l2 F --deep_l2 F --dropout F --min_count N
//             --dense_lr F
//             --deep_dim N
//             --hidden 64,32 --block_dim N
//             --seed N --memory_budget_mb N --no_progress --no_plot]
//            [--dense ps|allreduce --dense_backend gloo|nccl
//             --collective_host HOST]
//       Trains the --model (train/wide_deep.h: DeepFwFM, the default;
//       Wide&Deep; DeepFM; DCN-v2 with --cross_layers cross layers, default
//       2; or the lr baseline, the wide part alone, whose --wide_lr
//       defaults to 1.0 and --min_count to 0; the others' --min_count
//       defaults to 2)
//       (train/trainer.h). --store:
//         local:DIR              embedded Store (default: local:CDIR/store)
//         servers:h1:p1,h2:p2    ps-server cluster through RemoteClient
//         scheduler:HOST:PORT    a cluster worker (rpc/client/cluster_worker.h)
//       --valid_fraction, --patience: the validation split, early stopping
//       and best checkpoint of train/trainer.h; with local:DIR the test
//       files are evaluated on the best checkpoint (opened read-only).
//       --wide_l1/--wide_l2: FTRL's l1/l2 of the wide part; --deep_l2: L2
//       on each deep embedding row, applied lazily when the row is updated
//       (the optimizer's weight_decay, run by the store); --dropout: the
//       MLP's hidden dropout rate in training steps (train/mlp.h);
//       --min_count: rare ids share a per-field row (train/rare_ids.h).
//       --cache_rows 0 trains straight on the client (no worker cache).
//       --dense ps|allreduce: the dense weights (MLP, wide linear) as psdb
//       dense tables, or replicated on every worker and averaged by
//       AllReduce (train/replicated_dense.h) over --dense_backend gloo|nccl
//       (collective/group.h: the group forms through the scheduler;
//       --collective_host is the address gloo binds). allreduce needs
//       scheduler:HOST:PORT and --mode sync, and is the default there with
//       2+ workers.
//       --dry_run: validate every flag, PSDB_URL and PS_NODE_ID as that
//       start would, print the settings and which PS_* variables it reads
//       (PS_NODE_ID, as a cluster worker) or ignores, and exit 0 (1 or 2
//       as the start would); reads no data, opens no store, joins nothing.
//
// Exit codes: 0 success, 1 failure, 2 usage error.
//
// Thread-safety: RunTrain is a blocking call.
#ifndef PSDB_TOOLS_TRAIN_TRAIN_CLI_H_
#define PSDB_TOOLS_TRAIN_TRAIN_CLI_H_

#include <ostream>

namespace psdb::train {

// Runs ps-train with argv; messages go to `out` / `err` (training logs to
// stdout, the progress bar to stderr).
int RunTrain(int argc, const char* const* argv, std::ostream& out,
             std::ostream& err);

}  // namespace psdb::train

#endif  // PSDB_TOOLS_TRAIN_TRAIN_CLI_H_
