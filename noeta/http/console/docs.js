// Renders the OpenAPI document FastAPI generates (/openapi.json) as a readable page: the endpoints
// grouped by tag, each with its parameters, body, answers and whether it needs the API key, then
// the schemas they refer to. No third-party code, nothing fetched but /openapi.json.
const root = document.getElementById("docs");

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") el.textContent = value;
    else if (value !== undefined && value !== null) el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) if (child) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

function typeOf(schema) {
  if (!schema) return "";
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    return h("a", { href: `#schema-${name}`, text: name });
  }
  const union = schema.anyOf || schema.oneOf;
  if (union) return h("span", {}, ...union.flatMap((s, i) => (i ? [" | ", typeOf(s)] : [typeOf(s)])));
  if (schema.type === "array") return h("span", {}, "array of ", typeOf(schema.items));
  if (schema.enum) return h("span", { text: schema.enum.map((v) => JSON.stringify(v)).join(" | ") });
  if (schema.const !== undefined) return h("span", { text: JSON.stringify(schema.const) });
  if (schema.type === "object" && schema.additionalProperties && schema.additionalProperties !== true) {
    return h("span", {}, "object of ", typeOf(schema.additionalProperties));
  }
  return h("span", { text: schema.type || "any" });
}

function note(schema) {
  const bounds = [];
  if (schema.minimum !== undefined) bounds.push(`≥ ${schema.minimum}`);
  if (schema.maximum !== undefined) bounds.push(`≤ ${schema.maximum}`);
  if (schema.default !== undefined) bounds.push(`default ${JSON.stringify(schema.default)}`);
  return [schema.description, bounds.join(", ")].filter(Boolean).join("; ");
}

function schemaTable(schema) {
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  return h("table", {}, h("thead", {}, h("tr", {}, h("th", { text: "field" }), h("th", { text: "type" }), h("th", { text: "" }))),
    h("tbody", {}, Object.entries(props).map(([name, p]) => h("tr", {},
      h("td", {}, h("code", { text: name }), required.has(name) ? h("span", { class: "muted", text: " required" }) : null),
      h("td", {}, typeOf(p)),
      h("td", { class: "muted", text: note(p) })))));
}

function parameters(op) {
  if (!op.parameters) return null;
  return h("table", {}, h("tbody", {}, op.parameters.map((p) => h("tr", {},
    h("td", {}, h("code", { text: p.name }), h("span", { class: "muted", text: ` ${p.in}${p.required ? ", required" : ""}` })),
    h("td", {}, typeOf(p.schema)),
    h("td", { class: "muted", text: note({ ...p.schema, description: p.description }) })))));
}

function answers(op) {
  return h("ul", {}, Object.entries(op.responses).map(([status, r]) => {
    const content = r.content || {};
    const kinds = Object.keys(content);
    const what = kinds.includes("text/event-stream") ? "(Server-Sent Events)"
      : kinds.includes("application/json") ? typeOf(content["application/json"].schema) : kinds.join(", ");
    return h("li", {}, h("b", { text: status }), ` ${r.description} `, what);
  }));
}

function operation(path, method, op) {
  const parts = [h("h3", {}, h("code", { text: `${method.toUpperCase()} ${path}` })), h("p", {}, op.summary || "",
    op.security ? h("span", { class: "badge", text: "API key" }) : h("span", { class: "badge", text: "public" }))];
  const params = parameters(op);
  if (params) parts.push(h("p", { class: "muted", text: "parameters" }), params);
  const body = op.requestBody && op.requestBody.content["application/json"];
  if (body) parts.push(h("p", {}, "body (JSON): ", typeOf(body.schema)));
  parts.push(answers(op));
  return h("section", { class: "card", "data-operation": `${method.toUpperCase()} ${path}` }, parts);
}

fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  const sections = [h("h1", { text: `${doc.info.title} ${doc.info.version}` }), h("p", { text: doc.info.description })];
  const byTag = new Map();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push(operation(path, method, op));
    }
  }
  for (const [tag, operations] of byTag) sections.push(h("h2", { text: tag }), ...operations);
  sections.push(h("h1", { text: "Schemas" }));
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    sections.push(h("section", { class: "card", id: `schema-${name}` }, h("h3", { text: name }),
      schema.description ? h("p", { text: schema.description }) : null,
      schema.properties ? schemaTable(schema) : h("p", {}, typeOf(schema))));
  }
  root.replaceChildren(...sections);
}).catch((err) => { root.textContent = `Could not load /openapi.json: ${err}`; });
