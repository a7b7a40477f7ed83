"""python -m lab        : print lab's configuration (build, driver, GPUs, producers found)
python -m lab demo   : run lab's ops on whichever of torch / CuPy is installed, checked and timed"""
import sys


def main(argv):
    if argv[1:] == ["demo"]:
        from lab._demo import main as demo
        return demo()
    if len(argv) > 1:
        print(__doc__)
        return 2
    from lab._config import describe
    print(describe())
    return 0


sys.exit(main(sys.argv))
