"""What the GPU's clock and power did while a block of work ran: nvidia-smi, in a process beside the
benchmark, reads the SM clock (MHz) and the board's power draw (W) every 50 ms. It tells a step that
ran slower because the GPU held lower clocks at its power limit from one that did more work: two
implementations of one training step can draw the same 700 W and still differ in the clock each gets.
Where nvidia-smi is missing, nothing is sampled and the summary is empty."""
import shutil
import statistics
import subprocess

QUERY = ["--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50"]


def parse(lines):
    """(SM MHz, W) from nvidia-smi's CSV lines; a line it cannot read ('[N/A]', a blank) is skipped."""
    samples = []
    for line in lines:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 2:
            continue
        try:
            samples.append((float(fields[0]), float(fields[1])))
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
    """with GpuSampler(gpu_id): ...  then .summary(): the median SM clock and power over the block."""

    def __init__(self, gpu_id=None):
        self.gpu_id, self.process, self.samples = gpu_id, None, []

    def __enter__(self):
        smi = shutil.which("nvidia-smi")
        if smi is not None:
            command = [smi] + QUERY + ([f"--id={self.gpu_id}"] if self.gpu_id else [])
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            output, _ = self.process.communicate(timeout=10)
            self.samples = parse(output.splitlines())
        return False

    def summary(self):
        """{'sm_mhz', 'watts', 'samples'} (medians), or {} where nothing was sampled."""
        if not self.samples:
            return {}
        return dict(sm_mhz=statistics.median(s[0] for s in self.samples),
                    watts=statistics.median(s[1] for s in self.samples), samples=len(self.samples))
