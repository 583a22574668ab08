"""replhub toolkit: matplotlib figures as a cell's images, as Jupyter's
inline backend (matplotlib-inline) shows them.

This module is a matplotlib backend (module://replhub_toolkit.mplinline),
which the worker selects as matplotlib is first imported, unless
$MPLBACKEND chose another: figures draw with Agg, plt.show() shows every
open figure as a PNG and closes it, and so does the end of each cell for
the figures left open. A figure as a cell's value shows as a PNG too,
whatever the backend. Nothing here runs in a session that does not import
matplotlib. Python 3.6+, any matplotlib from 2.x.
"""

import sys

NAME = "module://replhub_toolkit.mplinline"


def png(fig):
    """fig as PNG bytes, trimmed to what it draws; None if it cannot draw."""
    import io
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", bbox_inches="tight")
    except Exception as e:
        sys.stderr.write("[display: the figure did not draw: %s: %s]\n" % (type(e).__name__, str(e)[:200]))
        return None
    return buf.getvalue()


def select(matplotlib):
    """Make this the default backend of a matplotlib just imported, unless
    the user chose one in the environment."""
    import os
    if os.environ.get("MPLBACKEND"):
        return
    try:
        matplotlib.rcParams["backend"] = NAME
    except Exception:
        pass


def active():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return False
    try:
        return plt.get_backend() == NAME
    except Exception:
        return False


def show_one(fig):
    """fig as an image of the cell, once a cell."""
    from replhub_toolkit import display
    if id(fig) in display._shown:
        return
    display._shown.add(id(fig))
    data = png(fig)
    if data is not None:
        display.add("image/png", data)


def show(*args, **kwargs):
    """plt.show(): every open figure, shown once, then closed."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        from matplotlib._pylab_helpers import Gcf
        figs = [m.canvas.figure for m in Gcf.get_all_fig_managers()]
    except Exception:
        return
    for fig in figs:
        show_one(fig)
    plt.close("all")


def flush():
    """At the end of a cell: the figures left open, where this backend runs."""
    if active():
        show()


def draw_if_interactive(*args, **kwargs):
    pass


# The backend's parts, for matplotlib's pyplot (2.x asks for the
# functions, 3.x for the classes): Agg's canvas, and a manager whose show()
# (fig.show()) shows its figure.
try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg as _Canvas
    from matplotlib.backend_bases import FigureManagerBase as _Manager
except ImportError:  # imported without matplotlib: png(), show(), flush() only
    pass
else:
    class FigureManager(_Manager):
        def show(self, *args, **kwargs):
            show_one(self.canvas.figure)

    class FigureCanvas(_Canvas):
        manager_class = FigureManager

    def new_figure_manager(num, *args, **kwargs):
        from matplotlib.figure import Figure
        cls = kwargs.pop("FigureClass", Figure)
        return new_figure_manager_given_figure(num, cls(*args, **kwargs))

    def new_figure_manager_given_figure(num, figure):
        return FigureManager(FigureCanvas(figure), num)
