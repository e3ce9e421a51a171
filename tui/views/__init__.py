"""What the screens show, as data and text: the rows, lines and cells each view draws from core's values.

No widget lives here and nothing here imports one: a widget takes these types (a heat row, a chart's
drawing options, a baseline's overlay, a token series) and draws them.
"""
