// report_layout.js - injected by report.sh into a copy of tern-report's
// HTML: checks, after layout, that every chart fills the page's width,
// that every <text> of every chart lies inside its chart and the viewport,
// that tick labels do not overlap, and that text is at least 9 px tall;
// and that every table has a row below its header (an empty one says
// so) and each column's header is aligned as its cells are.
// Writes "LAYOUT-OK n" or "LAYOUT-BAD what..." into document.title, which
// the test reads with chromium --dump-dom.
(function () {
	var bad = [], n = 0;
	var vw = document.documentElement.clientWidth;
	var svgs = document.querySelectorAll("svg");
	function inside(b, o) {
		return b.left >= o.left - 0.5 && b.right <= o.right + 0.5 &&
			b.top >= o.top - 0.5 && b.bottom <= o.bottom + 0.5;
	}
	function overlap(a, b) {
		return a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
			a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
	}
	for (var i = 0; i < svgs.length; i++) {
		var s = svgs[i], sb = s.getBoundingClientRect();
		var body = document.body.getBoundingClientRect();
		if (sb.width < 0.9 * body.width)
			bad.push("svg" + i + " width " + Math.round(sb.width) + " of " + Math.round(body.width));
		if (sb.left < 0 || sb.right > vw + 0.5)
			bad.push("svg" + i + " outside the viewport");
		var texts = s.querySelectorAll("text"), boxes = [];
		for (var k = 0; k < texts.length; k++) {
			var t = texts[k], b = t.getBoundingClientRect();
			n++;
			if (!inside(b, sb) || b.left < 0 || b.right > vw + 0.5)
				bad.push("svg" + i + " text '" + t.textContent + "' clipped");
			if (b.height < 9)
				bad.push("svg" + i + " text '" + t.textContent + "' " + b.height.toFixed(1) + " px tall");
			for (var m = 0; m < boxes.length; m++)
				if (overlap(b, boxes[m].b))
					bad.push("svg" + i + " '" + t.textContent + "' overlaps '" + boxes[m].s + "'");
			boxes.push({b: b, s: t.textContent});
		}
	}
	if (svgs.length == 0)
		bad.push("no charts");
	var tables = document.querySelectorAll("table");
	for (var i = 0; i < tables.length; i++) {
		var rows = tables[i].rows, head = rows.length ? rows[0].cells : [];
		var h2 = tables[i].previousElementSibling;
		var name = h2 && h2.tagName == "H2" ? h2.textContent : "table" + i;
		if (rows.length < 2)
			bad.push("'" + name + "': a header and nothing below it");
		for (var c = 0; c < head.length; c++) {
			var ha = getComputedStyle(head[c]).textAlign;
			for (var r = 1; r < rows.length; r++) {
				if (rows[r].cells.length != head.length)
					continue;	/* a row of its own, such as "none" */
				var ca = getComputedStyle(rows[r].cells[c]).textAlign;
				if (ha != ca) {
					bad.push("'" + name + "' column '" + head[c].textContent + "': header " +
						 ha + ", cells " + ca);
					break;
				}
			}
		}
	}
	document.title = bad.length ? "LAYOUT-BAD " + bad.join("; ") : "LAYOUT-OK " + n;
})();
