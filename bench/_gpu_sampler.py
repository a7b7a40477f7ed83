"""What the GPU's clock and power did while a block of work ran: nvidia-smi, in a process beside the
benchmark, reads the SM clock (MHz), the board's instantaneous power draw (W) and the active clock
event reasons every 50 ms. It tells a step that ran slower because the GPU held lower clocks at its
power limit from one that did more work: two implementations of one training step can both run into
the 700 W cap and still differ in the clock each gets. `power.draw` is a one-second average that lags
a block of about a second (measured 2026-12-04: 370 W median over steps whose average reached 700 W),
so the instantaneous reading is taken where the driver has it. Where nvidia-smi is missing, nothing is
sampled and the summary is empty."""
import shutil
import statistics
import subprocess

FIELDS = "clocks.sm,power.draw.instant,clocks_event_reasons.active"
OLDER_FIELDS = "clocks.sm,power.draw"  # drivers before the instantaneous reading and the event reasons
SW_POWER_CAP = 0x4  # nvml.h: nvmlClocksEventReasonSwPowerCap


def query(smi, fields, gpu_id, loop=True):
    return ([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"] + (["-lms", "50"] if loop else [])
            + ([f"--id={gpu_id}"] if gpu_id else []))


def parse(lines):
    """(SM MHz, W, event reasons or None) from nvidia-smi's CSV lines; a line it cannot read ('[N/A]', a
    blank, a heading) is skipped."""
    samples = []
    for line in lines:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) not in (2, 3):
            continue
        try:
            reasons = int(fields[2], 16) if len(fields) == 3 else None
            samples.append((float(fields[0]), float(fields[1]), reasons))
        except ValueError:
            continue
    return samples


def nvidia_smi_id(torch, device=0):
    """nvidia-smi's -i for torch's CUDA device (its PCI address; CUDA_VISIBLE_DEVICES renumbers the
    devices torch sees but not nvidia-smi's), or None where torch does not report the address."""
    props = torch.cuda.get_device_properties(device)
    try:
        return f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    except AttributeError:
        return None


class GpuSampler:
    """with GpuSampler(gpu_id): ...  then .summary(): the median SM clock and power over the block, and
    the share of samples the driver held the clocks down for its power cap."""

    def __init__(self, gpu_id=None):
        self.gpu_id, self.process, self.samples = gpu_id, None, []

    def __enter__(self):
        smi = shutil.which("nvidia-smi")
        if smi is not None:
            probe = subprocess.run(query(smi, FIELDS, self.gpu_id, loop=False), capture_output=True, text=True)
            fields = FIELDS if probe.returncode == 0 and parse(probe.stdout.splitlines()) else OLDER_FIELDS
            self.process = subprocess.Popen(query(smi, fields, self.gpu_id), stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            output, _ = self.process.communicate(timeout=10)
            self.samples = parse(output.splitlines())
        return False

    def summary(self):
        """{'sm_mhz', 'watts', 'samples'} (medians) and 'power_capped' (the share of samples with the
        SW power cap active) where the driver reports the reasons; {} where nothing was sampled."""
        if not self.samples:
            return {}
        result = dict(sm_mhz=statistics.median(s[0] for s in self.samples),
                      watts=statistics.median(s[1] for s in self.samples), samples=len(self.samples))
        reasons = [s[2] for s in self.samples if s[2] is not None]
        if reasons:
            result["power_capped"] = sum(1 for r in reasons if r & SW_POWER_CAP) / len(reasons)
        return result
