/* quotagate report: the explorers. Each has a <select>, a plot and its data as JSON beside
   them (pipeline/plots.py, explorer); the data is sparse per time bucket (report_series.py)
   and made dense here, so the page carries every point once. Times are UTC. */
(function () {
  "use strict";
  var CONFIG = { displaylogo: false, responsive: true };
  var AXIS = { gridcolor: "#e5e5e5", zerolinecolor: "#bbb", automargin: true };

  function times(grid) {
    var x = new Array(grid.n);
    for (var i = 0; i < grid.n; i++) x[i] = grid.t0 + i * grid.w;
    return x;
  }

  function dense(grid, item, field, scale) {
    var y = new Array(grid.n).fill(0);
    var factor = Math.pow(10, item.e) * scale;
    var bucket = 0;
    for (var i = 0; i < item.b.length; i++) {
      bucket += item.b[i];
      y[bucket] = item[field][i] * factor;
    }
    return y;
  }

  function layout(title, yTitle) {
    return {
      title: { text: title },
      font: { family: "system-ui, sans-serif", size: 11, color: "#222" },
      paper_bgcolor: "white",
      plot_bgcolor: "white",
      height: 420,
      margin: { l: 10, r: 10, t: 50, b: 40 },
      hovermode: "x unified",
      hoverlabel: { namelength: -1 },
      legend: { orientation: "h", x: 1, xanchor: "right", y: 1.08 },
      xaxis: Object.assign({ type: "date", rangeslider: { visible: true, thickness: 0.08 } }, AXIS),
      yaxis: Object.assign({ title: { text: yTitle }, rangemode: "tozero" }, AXIS)
    };
  }

  function level(x, value, name, color, dash) {
    return {
      x: [x[0], x[x.length - 1]], y: [value, value], name: name, mode: "lines",
      line: { color: color, dash: dash, width: 1.5 }, hovertemplate: "%{y:,.4~g}"
    };
  }

  function explorer(id, draw) {
    var holder = document.getElementById(id);
    var source = document.getElementById(id + "-data");
    var select = document.getElementById(id + "-select");
    if (!holder || !source || !select) return;
    var data = JSON.parse(source.textContent);
    if (!data.items.length) {
      holder.textContent = "Nothing to show.";
      select.disabled = true;
      return;
    }
    var groups = {};
    data.items.forEach(function (item, index) {
      var parent = select;
      if (item.group) {
        parent = groups[item.group];
        if (!parent) {
          parent = groups[item.group] = document.createElement("optgroup");
          parent.label = item.group;
          select.appendChild(parent);
        }
      }
      var option = document.createElement("option");
      option.value = String(index);
      option.textContent = item.label;
      parent.appendChild(option);
    });
    var x = times(data.grid);
    // The choice is kept in the address (#qg-rates=produce%3A%20user%3Dalice), so a link to
    // the report can open on one key.
    var wanted = new URLSearchParams(location.hash.slice(1)).get(id);
    data.items.forEach(function (item, index) {
      if (title(item) === wanted) select.value = String(index);
    });
    function show() {
      var item = data.items[Number(select.value)];
      var figure = draw(data, item, x);
      Plotly.react(holder, figure.data, figure.layout, CONFIG);
      return item;
    }
    select.addEventListener("change", function () {
      var params = new URLSearchParams(location.hash.slice(1));
      params.set(id, title(show()));
      history.replaceState(null, "", "#" + params.toString());
    });
    show();
  }

  function title(item) {
    return item.group ? item.group + ": " + item.label : item.label;
  }

  explorer("qg-rates", function (data, item, x) {
    var unit = data.units[item.group] || "";
    var traces = [{
      x: x, y: dense(data.grid, item, "v", 1), name: "sustained rate (" + data.grid.label +
        " max)", mode: "lines", line: { color: "#4c72b0", width: 1.2, shape: "hv" },
      hovertemplate: "%{y:,.4~g} " + unit
    }];
    if (item.q !== null) traces.push(level(x, item.q, "current quota", "#c44e52", "dash"));
    if (item.r !== null) traces.push(level(x, item.r, "recommended", "#55a868", "dot"));
    return { data: traces, layout: layout(title(item), unit) };
  });

  explorer("qg-throttles", function (data, item, x) {
    var bar = function (field, name, color) {
      return {
        x: x, y: dense(data.grid, item, field, 0.001), name: name, type: "bar",
        marker: { color: color }, hovertemplate: "%{y:,.4~g} s"
      };
    };
    return {
      data: [
        bar("rec", "recorded by the gateway", "#8172b3"),
        bar("pred", "replayed with the candidate quotas", "#dd8452")
      ],
      layout: Object.assign(layout(item.label, "throttle seconds per " + data.grid.label), {
        barmode: "group", bargap: 0.1
      })
    };
  });
})();
