"""The PyTorch side of scripts/bench-gpu.sh: torchvision's ResNet on one GPU,
bf16 autocast, channels_last, cudnn.benchmark, SGD Nesterov, label smoothing
0.1 -- the settings bench-gpu.sh gives trainyard.
  python gpu_resnet_reference.py ROOT|synthetic DEPTH BATCH WORKERS EPOCHS_OR_STEPS
ROOT: ImageFolder + RandomResizedCrop(CROP) + flip + ToTensor + Normalize through
a DataLoader (pin_memory, persistent workers, prefetch 4); one JSON line per epoch,
then one of the CPU time (mode "cpu_time": user + sys seconds of this process and
its DataLoader workers, since it started, over the images of all epochs).
synthetic: one batch resident on the GPU for STEPS steps after 10 of warm-up:
the compute-bound rate, what no input pipeline can beat.
Environment: DEVICE=cpu runs on the CPU in fp32 (bench-gpu.sh's CPU path, which
checks the script's logic); CROP (224) the crop size; PROFILE_STEPS=A:B with ROOT:
skip A steps of the first epoch, record steps A+1..B with torch.profiler and
print one JSON line of host syncs and kernel launches per step, counted as
trainyard's --profile counts them (host/train/profiler.cpp), then stop."""
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time

import torch
import torchvision
from torchvision import datasets, transforms as T

root, depth, batch, workers, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
crop = int(os.environ.get("CROP", "224"))
device = torch.device("cpu" if os.environ.get("DEVICE") == "cpu" else "cuda")
cuda = device.type == "cuda"
torch.backends.cudnn.benchmark = os.environ.get("CUDNN_BENCHMARK", "1") == "1"
model = getattr(torchvision.models, f"resnet{depth}")(num_classes=10).to(device).to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)


def step(x, y):
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        loss = criterion(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def synchronize():
    if cuda:
        torch.cuda.synchronize()


# The counting rules of trainyard's --profile: host syncs are .item()
# (aten::_local_scalar_dense, any device) and the CUDA runtime's and driver's
# synchronisations; kernel launches the runtime's and driver's launch calls (a
# graph launch counts 1); a call inside another counted one of its kind counts
# once; host-side events only (a Kineto trace's cpu_op, cuda_runtime and
# cuda_driver categories); CUPTI's version suffixes ("_v7000") dropped.
SYNCS = {"aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
         "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemcpyDtoH",
         "cuMemcpyHtoD", "cuMemcpyDtoD"}
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
            "cuLaunchKernelEx", "cudaGraphLaunch"}


def count_waits(trace_path, steps):
    calls = []
    for e in json.load(open(trace_path)).get("traceEvents", []):
        if e.get("ph") != "X" or e.get("cat", "").lower() not in ("cpu_op", "cuda_runtime", "cuda_driver"):
            continue
        name = e["name"].split("_")[0] if e["name"].startswith("cu") else e["name"]
        if name in SYNCS or name in LAUNCHES:
            calls.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), name, name in SYNCS))
    calls.sort(key=lambda c: (c[0], -c[1]))
    syncs, launches, until = {}, 0, {True: None, False: None}
    for start, end, name, sync in calls:
        if until[sync] is not None and end <= until[sync]:
            continue  # inside the last one counted
        until[sync] = end
        if sync:
            syncs[name] = syncs.get(name, 0) + 1
        else:
            launches += 1
    return {"steps": steps, "host_syncs_per_step": sum(syncs.values()) / steps,
            "host_syncs_by_name": {k: v / steps for k, v in sorted(syncs.items())},
            "kernel_launches_per_step": launches / steps}


common = {"impl": "pytorch", "depth": depth, "batch": batch, "device": device.type, "crop": crop,
          "torch": torch.__version__, "torchvision": torchvision.__version__}
if root == "synthetic":
    x = torch.randn(batch, 3, crop, crop, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)
    for _ in range(10 if cuda else 2):
        step(x, y)
    synchronize()
    start = time.perf_counter()
    for _ in range(count):
        step(x, y)
    synchronize()
    secs = time.perf_counter() - start
    print(json.dumps({**common, "mode": "synthetic", "steps": count, "images_per_s": count * batch / secs}), flush=True)
    sys.exit(0)

transform = T.Compose([T.RandomResizedCrop(crop), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
loader = torch.utils.data.DataLoader(datasets.ImageFolder(root, transform), batch_size=batch, shuffle=True,
                                     num_workers=workers, pin_memory=cuda, drop_last=True,
                                     persistent_workers=workers > 0, prefetch_factor=4 if workers > 0 else None)

if os.environ.get("PROFILE_STEPS"):
    skip, until = (int(v) for v in os.environ["PROFILE_STEPS"].split(":"))
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    profiler, done = None, 0
    for i, (x, y) in enumerate(loader):
        if i == skip:
            synchronize()
            profiler = torch.profiler.profile(activities=activities)
            profiler.start()
        x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        step(x, y)
        if profiler is not None:
            done += 1
            if i + 1 == until:
                break
    if profiler is None:
        sys.exit(f"error: PROFILE_STEPS={skip}:{until}: the epoch has {len(loader)} steps; expected more than {skip}")
    profiler.stop()
    with tempfile.TemporaryDirectory() as tmp:
        profiler.export_chrome_trace(os.path.join(tmp, "trace.json"))
        print(json.dumps({**common, "mode": "profile", **count_waits(os.path.join(tmp, "trace.json"), done)}),
              flush=True)
    sys.exit(0)

trained = 0
for epoch in range(count):
    synchronize()
    start = time.perf_counter()
    images, wait = 0, 0.0
    batches = iter(loader)
    while True:
        waited = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            break
        wait += time.perf_counter() - waited
        x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        loss = step(x, y)
        images += x.shape[0]
    synchronize()
    secs = time.perf_counter() - start
    print(json.dumps({**common, "mode": "jpeg", "epoch": epoch + 1, "workers": workers, "images": images,
                      "secs": round(secs, 3), "images_per_s": images / secs, "input_wait_share": wait / secs,
                      "loss": float(loss)}), flush=True)
    trained += images

# The workers' CPU time counts once they have exited and been waited for
# (RUSAGE_CHILDREN): drop the loader's persistent iterator, which shuts them
# down and joins them, and join whatever else is left.
loader = batches = None
for child in multiprocessing.active_children():
    child.join()
cpu = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
          for field in ("ru_utime", "ru_stime"))
print(json.dumps({**common, "mode": "cpu_time", "workers": workers, "images": trained, "cpu_s": round(cpu, 3),
                  "cpu_s_per_image": cpu / trained if trained else None}), flush=True)
