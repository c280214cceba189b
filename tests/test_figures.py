"""runner/figures.py: which size a chart draws along, what tells its lines apart, and the chart as PNG bytes."""

from __future__ import annotations

from runner import figures


def shapes(**varying) -> list[dict]:
    base = {"batch": 1, "seq_len": 8192, "kv_seq_len": 8192, "heads": 64, "kv_heads": 8, "tp": 1, "causal": True}
    return [{**base, **dict(zip(varying, values))} for values in zip(*varying.values())]


def test_t_is_drawn_along_when_it_varies_and_s_following_it_draws_no_lines():
    assert figures.swept_size(shapes(seq_len=[4096, 8192], kv_seq_len=[4096, 8192])) == ("seq_len", [])


def test_heads_that_follow_tp_draw_no_lines_of_their_own():
    tp = shapes(tp=[1, 2, 4], heads=[64, 32, 16], kv_heads=[8, 4, 2])
    assert figures.swept_size(tp, "tp") == ("tp", [])
    assert figures.swept_size(tp) == ("heads", [])  # unasked, the first size that varies


def test_an_axis_that_varies_apart_from_x_tells_lines_apart():
    mixed = shapes(seq_len=[4096, 4096, 8192, 8192], kv_seq_len=[4096, 4096, 8192, 8192],
                   causal=[True, False, True, False])
    assert figures.swept_size(mixed) == ("seq_len", ["causal"])


def test_a_chart_of_two_sources_draws_each_source_in_its_own_line_style():
    from matplotlib.figure import Figure

    def series(label, variant, source):
        return figures.Series(label, variant, ((1024.0, 1.0), (2048.0, 2.0)), source)

    # the burst source's cuDNN line comes first and its only line: still dashed, as every line of its source
    chart = figures.Chart("c", "t", "s", "x", "y", (series("cudnn (burst)", "cudnn", 1), series("xla", "xla", 0),
                                                    series("cudnn", "cudnn", 0)), ("steady", "burst"), False)
    axes = Figure().subplots()
    figures._plot(axes, chart)
    assert [line.get_linestyle() for line in axes.get_lines()] == ["--", "-", "-"]
    one = figures.Chart("c", "t", "s", "x", "y", (series("cudnn causal", "cudnn", 0),
                                                  series("cudnn", "cudnn", 0)), ("steady",), False)
    axes = Figure().subplots()
    figures._plot(axes, one)
    assert [line.get_linestyle() for line in axes.get_lines()] == ["-", "--"]  # one source: a variant's next line


def labelled_y(points: tuple, minor=None) -> list[str]:
    """The y tick labels a reader sees on a log chart of `points` (inside the axis, not blank); `minor`: the minor
    tick locator another matplotlib picks, in place of this one's."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    chart = figures.Chart("c", "t", "s", "x", "y", (figures.Series("xla", "xla", points, 0),), ("steady",))
    axes = FigureCanvasAgg(Figure()).figure.subplots()
    figures._plot(axes, chart)
    if minor is not None:
        axes.yaxis.set_minor_locator(minor)
    axes.figure.canvas.draw()  # the labels are made when drawn
    low, high = axes.get_ylim()
    ticks = [*axes.yaxis.get_major_ticks(), *axes.yaxis.get_minor_ticks()]
    return [t.label1.get_text() for t in ticks if t.label1.get_text() and low <= t.get_loc() <= high]


def test_a_narrow_log_axis_still_labels_at_least_two_values():
    assert len(labelled_y(((1024.0, 150.0), (2048.0, 320.0)))) >= 2  # 1-2-5 alone labels 200 only
    assert set(labelled_y(((1024.0, 0.5), (2048.0, 30.0)))) >= {"1", "10"}  # a wide one keeps its decades


def test_a_log_axis_labels_1_2_5_values_alone_whatever_minor_ticks_matplotlib_places():
    """matplotlib 3.8 (pyproject allows it) puts a log axis's minor ticks where AutoLocator would (100, 120, ..., 200)
    when one decade holds only one of its own: none of them is labelled, where 160 and 180 were (each rounds to 2e+02,
    which the label rule took for 200)."""
    from matplotlib.ticker import AutoLocator

    assert labelled_y(((1024.0, 95.0), (2048.0, 210.0)), minor=AutoLocator()) == ["100", "200"]
    assert labelled_y(((1024.0, 0.5), (2048.0, 30.0))) == ["0.5", "1", "2", "5", "10", "20"]


def test_a_log_axis_over_more_than_four_decades_labels_decades_alone_in_plain_numbers():
    """As the dashboard's (dashboard.charts.log_ticks): 1-2-5 up to four decades, decades past them; never 1e+06."""
    assert labelled_y(((1024.0, 0.004), (65536.0, 9000.0))) == ["0.01", "0.1", "1", "10", "100", "1000", "10000"]
    assert labelled_y(((1024.0, 0.2), (2048.0, 2000.0))) == ["1", "10", "100", "1000"]  # 4 decades, over 4 with margins
    assert labelled_y(((1024.0, 1.0), (2048.0, 2000.0)))[:4] == ["1", "2", "5", "10"]  # under 4 with margins: 1-2-5
    assert labelled_y(((1024.0, 0.00003), (2048.0, 0.0002))) == ["0.00005", "0.0001", "0.0002"]
    assert labelled_y(((1024.0, 3e5), (4096.0, 4e6))) == ["500000", "1000000", "2000000"]


def test_a_size_a_cell_holds_at_null_tells_lines_apart_and_is_never_the_x_axis():
    windows = shapes(seq_len=[64, 64, 128, 128], kv_seq_len=[64, 64, 128, 128], window=[None, 8, None, 8])
    assert figures.swept_size(windows) == ("seq_len", ["window"])
    assert figures.swept_size(shapes(window=[None, 8]), "window") == (None, ["window"])  # no size left to draw along
    pages = shapes(page_size=[16, None, 64, None], kv_seq_len=[4096, 4096, 8192, 8192])
    assert figures.swept_size(pages) == ("kv_seq_len", ["page_size"])
    assert figures.swept_size(shapes(page_size=[16, 64]))[0] == "page_size"  # every cell paged: a size as any


def test_a_chart_of_a_window_sweep_draws_the_windowed_and_unwindowed_cells_as_two_lines_and_one_alone_none():
    from helpers import params
    from runner.record import CellRecord

    def cell(seq_len, window, median_s):
        shape = params(batch=1, seq_len=seq_len, heads=2, head_dim=16, causal=True, window=window)
        return CellRecord.model_construct(experiment="e", variant="naive", params=shape, status="ok",
                                          median_s=median_s, timer="wall")

    cells = [cell(32, None, 1e-3), cell(32, 8, 5e-4), cell(64, None, 4e-3), cell(64, 8, 1e-3)]
    chart = figures.latency_chart("w-a", "e", cells)
    assert chart.x == "query sequence length T"
    assert {s.label: s.points for s in chart.series} == {"naive": ((32, 1.0), (64, 4.0)),
                                                         "naive W8": ((32, 0.5), (64, 1.0))}
    assert figures.draw(chart).startswith(b"\x89PNG")
    assert figures.latency_chart("w-a", "e", cells[:2]) is None  # a window alone sweeps no size: its tables show it


def test_a_charts_legend_and_runs_read_at_the_house_size_and_the_legend_keeps_off_the_plot():
    """Ten lines of long labels (MAX_SERIES) in 9 pt, as the titles, right of the plot and inside the figure."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    lines = tuple(figures.Series(f"cudnn_fp8 B{b} N64 K8 causal window 4096", "cudnn_fp8",
                                 ((1024.0, b / 10), (8192.0, b)), 0) for b in range(1, figures.MAX_SERIES + 1))
    chart = figures.Chart("c", "t", "s", "x", "y", lines, ("a-run-of-the-night",))
    with rc_context({"font.size": figures.FONT_PT}):
        figure = figures.figure_of(chart)
        FigureCanvasAgg(figure).draw()  # the layout is made when drawn
    legend, runs = figure.axes[0].get_legend(), figure._supxlabel
    assert figures.FONT_PT >= 9 and {t.get_fontsize() for t in legend.get_texts()} == {figures.FONT_PT}
    assert runs.get_text() == "runs: a-run-of-the-night" and runs.get_fontsize() == figures.FONT_PT
    plot, box, whole = figure.axes[0].get_window_extent(), legend.get_window_extent(), figure.bbox
    assert plot.x1 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1
