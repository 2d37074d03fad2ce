#include "core/closed_epochs.h"

#include <utility>

namespace scangate {

void ClosedEpochs::Publish(std::vector<ClosedEpoch> epochs) {
  auto next = std::make_shared<const std::vector<ClosedEpoch>>(std::move(epochs));
  Snapshot old;  // released after the lock: the last reference may free summaries of many MB
  MutexLock lock(&mu_);
  old = std::exchange(epochs_, std::move(next));
}

ClosedEpochs::Snapshot ClosedEpochs::Get() const {
  MutexLock lock(&mu_);
  return epochs_;
}

std::vector<EpochProbe> ClosedEpochs::PlanProbes(const std::vector<ClosedEpoch>& epochs,
                                                 std::span<const Digest> batch) {
  std::vector<EpochProbe> plan;
  for (const ClosedEpoch& e : epochs) {
    EpochProbe probe{e.id, {}};
    for (std::uint32_t i = 0; i < batch.size(); ++i) {
      if (e.summary == nullptr || e.summary->MayContain(batch[i])) probe.items.push_back(i);
    }
    if (!probe.items.empty()) plan.push_back(std::move(probe));
  }
  return plan;
}

}  // namespace scangate
